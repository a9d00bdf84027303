"""The ``ab`` command line: ``main`` (the entry point), ``commands`` (the table of commands and the
modules that register them) and ``app`` (serve, setup-demo, add-reader). Imports nothing here,
so ``ab --help`` stays cheap.
"""
