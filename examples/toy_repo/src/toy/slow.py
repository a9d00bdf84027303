"""Used by the tasks that exercise timeouts: waits far longer than any task allows."""

import time


def wait_forever():
    while True:
        time.sleep(1)
