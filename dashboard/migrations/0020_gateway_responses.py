from django.db import migrations, models
import django.db.models.deletion

import dashboard.models


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0019_gateway_call_body'),
    ]

    operations = [
        migrations.CreateModel(
            name='GatewayResponse',
            fields=[
                ('id', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('position', models.PositiveIntegerField()),
                ('reply', dashboard.models.JSONTextField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                              to='dashboard.project')),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='responses',
                                              to='dashboard.session')),
            ],
        ),
    ]
