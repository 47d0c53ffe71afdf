# Hostile candidate: ends the worker process the moment it is imported, without cleanup.
# Expected verdict: crash.
import os

os._exit(0)


def vector_add(x, y):
    return x + y
