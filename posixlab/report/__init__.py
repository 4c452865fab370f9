"""One HTML page per run folder (or several, compared) to browse a run's results: ``posixlab report RUN_DIR ...``.

``html``: the page's building blocks (no task knowledge); ``build``: ``build_report`` reads run folders and asks
each folder's task for its sections (``Task.report_sections``, ``Task.report_values``). This ``__init__`` imports
neither, so that a task may import ``posixlab.report.html`` without importing the tasks back (import
``posixlab.report.build`` for ``build_report``).
"""
