"""Screenshot a `graphc view` page in headless Chromium, one of its views selected.

    python tools/view_screenshot.py PAGE.html "forward + backward" OUT.png

Needs Debian's chromium and chromium-driver and selenium (`pip install -e ".[test-browser]"`),
as the viewer's browser test does. Prints the page's views, the one shown and how many
boxes it drew.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import Select, WebDriverWait


def main(page: str, view: str, png: str) -> None:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp()}")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(Path(page).resolve().as_uri())
        body = driver.find_element("tag name", "body")
        WebDriverWait(driver, 30).until(lambda _: body.get_attribute("data-ready"))
        select = Select(driver.find_element("tag name", "select"))
        print("views:", [option.text for option in select.options])
        chosen = next(o.text for o in select.options if o.text.startswith(view))
        select.select_by_visible_text(chosen)
        WebDriverWait(driver, 30).until(lambda _: body.get_attribute("data-ready"))
        print("shown:", chosen, "- boxes drawn:", body.get_attribute("data-visible"))
        driver.save_screenshot(png)
    finally:
        driver.quit()


if __name__ == "__main__":
    main(*sys.argv[1:4])
