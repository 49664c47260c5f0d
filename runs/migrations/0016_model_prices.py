"""Prices per model (per million tokens, from a date on), for the cost of runs; a model without one costs "unknown"."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0015_bundles'),
    ]

    operations = [
        migrations.CreateModel(
            name='ModelPrice',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('model', models.CharField(help_text='As an agent profile names it, e.g. openai:gpt-4o.', max_length=200)),
                ('input', models.DecimalField(decimal_places=6, max_digits=12, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1000)], verbose_name='input per million tokens')),
                ('output', models.DecimalField(decimal_places=6, max_digits=12, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1000)], verbose_name='output per million tokens')),
                ('cache_read', models.DecimalField(decimal_places=6, max_digits=12, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1000)], verbose_name='cache read per million tokens')),
                ('cache_write', models.DecimalField(decimal_places=6, max_digits=12, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1000)], verbose_name='cache write per million tokens')),
                ('valid_from', models.DateTimeField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['model', '-valid_from'],
                'constraints': [models.UniqueConstraint(fields=('model', 'valid_from'), name='one_price_per_model_and_start')],
            },
        ),
    ]
