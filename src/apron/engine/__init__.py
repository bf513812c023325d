"""Engine facts: what each vLLM release supports and defaults to, read from its own source."""
