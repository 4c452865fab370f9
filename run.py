"""Run posixlab from a checkout: ``python run.py variant=template`` is ``posixlab variant=template``.

The application lives in ``posixlab/cli.py`` (and its configs in ``posixlab/conf``, linked here as ``conf/``);
``posixlab/console.py`` is its entry point.
"""

from posixlab.console import entry

if __name__ == "__main__":
    entry()
