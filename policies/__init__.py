"""The CrossGuard policy pack of the training platform (rules in ``policies.rules``)."""
