"""PushT: push a T-shaped block onto a goal pose."""
