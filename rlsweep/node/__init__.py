"""The node a sweep runs on: `doctor` (what works here, what does not) and `wheelhouse` (an
offline install for a node without a package index).
"""
