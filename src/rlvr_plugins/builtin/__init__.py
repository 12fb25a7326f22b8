"""Built-in plugins, registered exactly like third-party ones (see ``manager.BUILTIN_PLUGINS``)."""
