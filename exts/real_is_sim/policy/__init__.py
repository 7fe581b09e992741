"""The flow-matching waypoint policy: 32 waypoints of 7 joint targets + progress over 1 s, four observation variants."""
