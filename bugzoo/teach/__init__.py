"""The teach layer: the catalogue for people.

``catalogue`` (``bugzoo list``, ``bugzoo show``), ``quiz`` (``bugzoo quiz``), ``report``
(``bugzoo report``, a static HTML site), ``exercises`` (``bugzoo exercise``) and ``export``
(``bugzoo export``, standalone reproducers built from the templates in ``reproducers``).
"""
