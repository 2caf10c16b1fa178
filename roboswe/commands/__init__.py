"""The handlers of the `roboswe` subcommands, one module per command (the table is in ``roboswe.cli``).

Each module offers ``add_arguments_<name>(parser)`` and ``run_<name>(args) -> int`` and imports
its heavy dependencies inside the handler, so ``roboswe --help`` stays fast.
"""
