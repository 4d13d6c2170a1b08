"""Review and undo (docs/behaviour.md#review-before-apply, docs/behaviour.md#restore): a refresh
of a model under review writes a proposal instead of applying its change; a person approves or
rejects it. The restore of a history version is ``mentalmodels.services.mental_model_restore``;
its route is here with the proposals'."""
