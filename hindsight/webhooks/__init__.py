"""Webhooks: a bank's subscriptions to its events and the deliveries of each event to them
(docs/behaviour.md#webhooks). Below the banks and the mental models, which emit events
(``hindsight.webhooks.outbox.emit``); above the job engine, whose beat schedule runs the sweep."""
