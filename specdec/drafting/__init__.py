"""The cross-request draft cache's file format (the drafter itself is compiled: specdec/controller.py)."""
