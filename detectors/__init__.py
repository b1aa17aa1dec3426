"""Built-in detectors, registered through the ``bugzoo.detectors`` entry-point group like any
third-party plug-in (see ``pyproject.toml``)."""
