import uuid

import django.contrib.postgres.fields
import django.db.models.deletion
import hindsight.infra.db
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('banks', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='Directive',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('name', models.TextField()),
                ('content', models.TextField()),
                ('priority', models.IntegerField(default=0)),
                ('is_active', models.BooleanField(default=True)),
                ('tags', django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), blank=True, default=list, size=None)),
                ('created_at', models.DateTimeField(db_default=hindsight.infra.db.ClockTimestamp())),
                ('updated_at', models.DateTimeField(db_default=hindsight.infra.db.ClockTimestamp())),
                ('bank', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='directives', to='banks.bank')),
            ],
            options={
                'indexes': [models.Index(fields=['bank', 'is_active'], name='directive_bank_active_idx')],
            },
        ),
        migrations.CreateModel(
            name='DirectiveScopeStamp',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tags', django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), blank=True, default=list, size=None)),
                ('changed_at', models.DateTimeField(db_default=hindsight.infra.db.ClockTimestamp())),
                ('bank', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='banks.bank')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('bank', 'tags'), name='directive_stamp_bank_tags_uniq')],
            },
        ),
    ]
