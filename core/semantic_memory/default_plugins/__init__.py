"""Plugins that ship inside core (see `semantic_memory.plugins.DEFAULT_PLUGINS`)."""
