from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('llm', '0002_bank_spend_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='llmrequest',
            name='structured_step',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
    ]
