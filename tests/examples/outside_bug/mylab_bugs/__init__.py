"""mylab's bugs for bugzoo (entry-point group ``bugzoo.bugs``)."""
