"""``python -m posixlab ...`` is the ``posixlab`` command (``posixlab.console.entry``)."""

if __name__ == "__main__":
    from posixlab.console import entry

    entry()
