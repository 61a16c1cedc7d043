"""Subcommands of ``hetero-ns3``: one module each, discovered by :mod:`hetero_ns3.cli.main`.

A command module defines ``NAME`` (str), ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. It parses, calls the library, prints; nothing else.
"""
