"""Web teleoperation of the twin robot: a viser page, the pusher target dragged in the table plane."""
