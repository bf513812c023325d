"""Calibration: the boots in the record store set against the plans the planner makes for them.

Two workflows that combine the store (records/) with the calculator (plan/), so they live in a room
above both rather than in either: `published.py` imports published boots as boot records, planning
each one with the settings it was served with (the prediction beside the measurement, which is what
calibration and `apron records compare` read); `factors.py` fits the terms the planner labels
observed to those boot-and-plan pairs (`apron calibrate`). The room is named for what both serve:
calibrating the planner against real boots. records/ stays the store, its documents and their views.
"""
