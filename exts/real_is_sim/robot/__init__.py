"""The Franka: description and limits (``franka``), and the follower that makes the real arm track the twin.

``follower``: the Follower interface, its health and joint state types; ``simulated_follower``: a model of the arm
(Ruckig at 1 kHz, latency, joint lag), steppable in simulated time; ``franky_follower``: the real arm via franky;
``safety``: the SafetyFilter / SafeFollower (limits, workspace box, step limit, watchdog) in front of any follower.
Import those modules directly; this package imports nothing heavy on its own.
"""
