"""The curriculum schedules (:func:`rlvr_kimi.curriculum.admitted_fraction`), in a module without torch so that the
plugin's options are read without it."""

SCHEDULES = ("linear", "step", "none")
