from django.db import migrations

# A directive change can turn pages stale (mentalmodels.directives.models), so the knowledge
# tree, which shows each page's staleness and is answered by version, must read as changed:
# every change stamp written bumps its bank's tree version, whoever writes it.
TRIGGER = """
CREATE FUNCTION directive_stamp_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM knowledge_tree_bump(NEW.bank_id);
    RETURN NULL;
END $$;
CREATE TRIGGER directive_stamp_changed
    AFTER INSERT OR UPDATE ON directives_directivescopestamp
    FOR EACH ROW EXECUTE FUNCTION directive_stamp_changed();
"""

DROP_TRIGGER = """
DROP TRIGGER directive_stamp_changed ON directives_directivescopestamp;
DROP FUNCTION directive_stamp_changed();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('directives', '0001_initial'),
        ('knowledge', '0002_tree_version'),
    ]

    operations = [
        migrations.RunSQL(TRIGGER, DROP_TRIGGER),
    ]
