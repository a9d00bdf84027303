"""What the tests share and no test file is: the fixture modules that tests/conftest.py loads
(``pytest_plugins``), the fake model provider, the ``ab`` runner, the service stacks and the
parallel workers' rules. Test files live in the folders that mirror the app's packages."""
