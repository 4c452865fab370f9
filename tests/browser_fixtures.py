"""A real browser for the tests (``browser`` fixture, registered by conftest.py): Debian's headless Chromium driven
by Selenium through Debian's chromedriver, started once per test session and quit at its end.

Selenium is given the chromedriver found on ``PATH`` (``Service(executable_path=...)``), so Selenium Manager never
looks for, or downloads, a browser or a driver: nothing leaves the machine. The browser keeps its console
(``goog:loggingPrefs``: browser ALL), which a test reads with ``driver.get_log("browser")`` (each read empties it).

Where ``chromium`` or ``chromedriver`` is not installed, or selenium is not, the tests that use the browser are
skipped with the reason (``-ra`` lists it); .ci/run installs the packages before the tests. The tests that use it
are marked ``slow`` (they start a browser: about a second).
"""

from __future__ import annotations

import shutil

import pytest

INSTALL = "apt-get install -y --no-install-recommends chromium chromium-driver (as .ci/run does)"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WINDOW = (1400, 1000)


def find_browser() -> tuple[str | None, str | None]:
    """(the browser's path, the driver's path), each None when it is not on PATH."""
    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None), shutil.which("chromedriver")


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """A headless Chromium (Selenium ``webdriver.Chrome``) at a 1400 x 1000 window, shared by the session: a test
    loads its page with ``driver.get(path.as_uri())``."""
    binary, driver_path = find_browser()
    if binary is None or driver_path is None:
        pytest.skip(f"no {'chromium' if binary is None else 'chromedriver'} on PATH; install it: {INSTALL}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed: pip install -r requirements-test.txt")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                     "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                     f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    log = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"
    driver = webdriver.Chrome(service=Service(executable_path=driver_path, log_output=str(log)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
