"""``python -m posixlab ...`` is the ``posixlab`` command (``posixlab.cli.entry``)."""

if __name__ == "__main__":
    from posixlab.cli import entry

    entry()
