from toy.slow import wait_forever


def test_waits_forever():
    wait_forever()
