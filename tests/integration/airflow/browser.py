"""Headless Chromium for the browser tests (Debian's chromium and chromium-driver, see the Makefile)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

#: Where the browser tests leave their screenshots (``docs/images/streambed-page.png`` is one of them).
ARTIFACTS = Path(os.environ.get("STREAMBED_TEST_ARTIFACTS", Path(__file__).parents[3] / "test-artifacts"))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"  # Debian's, installed by `make install`


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver (no network: background services off)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(f"{CHROMIUM} and {CHROMEDRIVER} are missing: `make install` installs Debian's chromium packages")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--window-size=1280,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def log_in(driver: Any, url: str, user: str, password: str) -> None:
    """Log in through Airflow's own login form (the simple auth manager's) at ``url``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 30)
    driver.get(f"{url}/auth/login")
    wait.until(ready.presence_of_element_located((By.NAME, "username"))).send_keys(user)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda driver: driver.get_cookie("_token") is not None)
