"""One module per correction rule (see apron.rules.registry for what a module defines)."""
