import hindsight.infra.db
from django.db import migrations, models

# The tree's version keys (mentalmodels.knowledge.models), kept by the database whoever writes
# the rows. knowledge_tree_bump: the bank's KnowledgeTreeVersion set, in the writing transaction,
# to the next value of one sequence that nothing resets (no column owns it: a TRUNCATE ...
# RESTART IDENTITY leaves it, and it starts at a random value: a database made again does not
# repeat the numbers of the last one), so that no two states of a bank's tree, even across
# a deleted and re-created bank, a rolled-back write or an emptied table, share a version.
# Row triggers: every node insert, update and delete; a page's mental model when a column the
# tree renders or its staleness reads changes (not the cron tick's clocks, the embedding...),
# or when it is deleted. Memories: each DELETE statement adds one KnowledgeMemoryForget row per
# bank it deleted from, stamped on the write clock (the bank's shared write lock 0x48534D =
# 4739917, then clock_timestamp(), as every memory write stamps updated_at); an UPDATE that
# changes a memory's scope (tags, fact type, bank) without a later stamp writes one too. A
# bank's delete bumps its version (never reset: see above) and removes its deletion rows; a
# TRUNCATE of the nodes, the models or the memories moves every bank's version.
TRIGGERS = """
DO $$ BEGIN
    EXECUTE format('CREATE SEQUENCE knowledge_tree_version_seq START %s',
                   1 + floor(random() * 1e15)::bigint);
END $$;

-- Each distinct bank named (null: none, as OLD in an insert).
CREATE FUNCTION knowledge_tree_bump(VARIADIC banks text[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO knowledge_knowledgetreeversion AS v (bank_id, version)
    SELECT bank, nextval('knowledge_tree_version_seq')
      FROM (SELECT DISTINCT bank FROM unnest(banks) AS bank WHERE bank IS NOT NULL) AS named
    ON CONFLICT (bank_id) DO UPDATE SET version = nextval('knowledge_tree_version_seq');
$$;

CREATE FUNCTION knowledge_node_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM knowledge_tree_bump(OLD.bank_id, NEW.bank_id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER knowledge_node_changed
    AFTER INSERT OR UPDATE OR DELETE ON knowledge_knowledgenode
    FOR EACH ROW EXECUTE FUNCTION knowledge_node_changed();

CREATE FUNCTION knowledge_page_model_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM knowledge_knowledgenode
                WHERE mental_model_id = COALESCE(NEW.uid, OLD.uid)) THEN
        PERFORM knowledge_tree_bump(OLD.bank_id, NEW.bank_id);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER knowledge_page_model_changed
    AFTER UPDATE ON mentalmodels_mentalmodel FOR EACH ROW
    WHEN ((OLD.bank_id, OLD.mental_model_id, OLD.source_query, OLD.tags, OLD.trigger,
           OLD.last_refreshed_at, OLD.last_refresh_failed_at, OLD.last_memory_seen_at)
          IS DISTINCT FROM
          (NEW.bank_id, NEW.mental_model_id, NEW.source_query, NEW.tags, NEW.trigger,
           NEW.last_refreshed_at, NEW.last_refresh_failed_at, NEW.last_memory_seen_at))
    EXECUTE FUNCTION knowledge_page_model_changed();
CREATE TRIGGER knowledge_page_model_deleted
    AFTER DELETE ON mentalmodels_mentalmodel FOR EACH ROW
    EXECUTE FUNCTION knowledge_page_model_changed();

-- Each distinct bank named: its shared write lock (in a stable order), then its row stamped.
CREATE FUNCTION knowledge_memory_forget(VARIADIC banks text[]) RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock_shared(4739917, hashtext(bank))
      FROM (SELECT DISTINCT bank FROM unnest(banks) AS bank WHERE bank IS NOT NULL
             ORDER BY bank) AS named;
    INSERT INTO knowledge_knowledgememoryforget (bank_id, forgotten_at)
    SELECT bank, clock_timestamp()
      FROM (SELECT DISTINCT bank FROM unnest(banks) AS bank WHERE bank IS NOT NULL) AS named;
$$;

CREATE FUNCTION knowledge_memories_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM knowledge_memory_forget(VARIADIC ARRAY(SELECT bank_id FROM gone));
    RETURN NULL;
END;
$$;
CREATE TRIGGER knowledge_memories_deleted
    AFTER DELETE ON banks_memoryunit REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_memories_deleted();

CREATE FUNCTION knowledge_memory_rescoped() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM knowledge_memory_forget(OLD.bank_id, NEW.bank_id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER knowledge_memory_rescoped
    AFTER UPDATE ON banks_memoryunit FOR EACH ROW
    WHEN (NEW.bank_id IS DISTINCT FROM OLD.bank_id OR NEW.updated_at < OLD.updated_at
          OR ((NEW.tags, NEW.fact_type) IS DISTINCT FROM (OLD.tags, OLD.fact_type)
              AND NEW.updated_at <= OLD.updated_at))
    EXECUTE FUNCTION knowledge_memory_rescoped();

-- TRUNCATE fires no row trigger: every bank's version moves.
CREATE FUNCTION knowledge_trees_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE knowledge_knowledgetreeversion SET version = nextval('knowledge_tree_version_seq');
    RETURN NULL;
END;
$$;
CREATE TRIGGER knowledge_nodes_emptied AFTER TRUNCATE ON knowledge_knowledgenode
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_trees_emptied();
CREATE TRIGGER knowledge_models_emptied AFTER TRUNCATE ON mentalmodels_mentalmodel
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_trees_emptied();
CREATE TRIGGER knowledge_memories_emptied AFTER TRUNCATE ON banks_memoryunit
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_trees_emptied();

CREATE FUNCTION knowledge_bank_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM knowledge_tree_bump(OLD.id);
    DELETE FROM knowledge_knowledgememoryforget WHERE bank_id = OLD.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER knowledge_bank_deleted
    AFTER DELETE ON banks_bank FOR EACH ROW EXECUTE FUNCTION knowledge_bank_deleted();
"""
DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS knowledge_bank_deleted ON banks_bank;
DROP TRIGGER IF EXISTS knowledge_memories_emptied ON banks_memoryunit;
DROP TRIGGER IF EXISTS knowledge_models_emptied ON mentalmodels_mentalmodel;
DROP TRIGGER IF EXISTS knowledge_nodes_emptied ON knowledge_knowledgenode;
DROP TRIGGER IF EXISTS knowledge_memory_rescoped ON banks_memoryunit;
DROP TRIGGER IF EXISTS knowledge_memories_deleted ON banks_memoryunit;
DROP TRIGGER IF EXISTS knowledge_page_model_deleted ON mentalmodels_mentalmodel;
DROP TRIGGER IF EXISTS knowledge_page_model_changed ON mentalmodels_mentalmodel;
DROP TRIGGER IF EXISTS knowledge_node_changed ON knowledge_knowledgenode;
DROP FUNCTION IF EXISTS knowledge_bank_deleted(), knowledge_trees_emptied(), knowledge_memory_rescoped(),
    knowledge_memories_deleted(), knowledge_memory_forget(text[]), knowledge_page_model_changed(),
    knowledge_node_changed(), knowledge_tree_bump(text[]);
DROP SEQUENCE IF EXISTS knowledge_tree_version_seq;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0001_initial'),
        ('banks', '0006_memoryunit_bank_scoped_gin'),
        ('mentalmodels', '0005_refresh_failure_class'),
    ]

    operations = [
        migrations.CreateModel(
            name='KnowledgeTreeVersion',
            fields=[
                ('bank_id', models.CharField(max_length=255, primary_key=True, serialize=False)),
                ('version', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='KnowledgeMemoryForget',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('bank_id', models.CharField(max_length=255)),
                ('forgotten_at', models.DateTimeField(db_default=hindsight.infra.db.ClockTimestamp())),
            ],
            options={
                'indexes': [models.Index(fields=['bank_id', 'forgotten_at'], name='knowledge_forget_bank_idx')],
            },
        ),
        migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
    ]
