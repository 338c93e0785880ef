"""Workspaces: the checkouts of one repository share their agents through the SDK.

A bridge lists and resumes agents by ``cwd``, an absolute path on its own machine. Two
clones of one repository are one *workspace* when their bridges tell the store so: the
launcher reads the checkout's identity where the checkout is (:mod:`.identity`) and
hands the bridge a store URL whose path carries it (:mod:`.segment`); the server keeps
an agent whose ``cwd`` is inside that checkout against the workspace and answers every
checkout of the workspace with the path inside its own root (:mod:`.paths`,
:mod:`.translate`). Nothing here reaches a backend: every backend keeps the ``cwd`` it
is given.
"""
