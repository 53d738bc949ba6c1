"""The viewer page in a real browser: headless Chromium driven by selenium opens it,
expands a group, searches a node, reads the details panel, switches views and takes a
screenshot that must show a drawing. Skips, saying what to install, without them."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import graphc as gc
from tests.viz.test_view import HOSTILE, hostile_graph, page_data, unrolled

INSTALL = "apt-get install -y chromium chromium-driver && pip install selenium"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium(profile: Path, width: int = 1400, height: int = 900) -> Any:
    """A headless Chromium under selenium, with a fresh profile in `profile`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("selenium.webdriver", reason=f"needs selenium: {INSTALL}")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip(f"needs Chromium and chromedriver: {INSTALL}")
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    yield driver
    driver.quit()


def open_page(browser: Any, path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(path.as_uri())
    body = browser.find_element("tag name", "body")
    WebDriverWait(browser, 30).until(lambda d: body.get_attribute("data-ready"))


def visible(browser: Any) -> int:
    return int(browser.find_element("tag name", "body").get_attribute("data-visible") or 0)


def details(browser: Any) -> tuple[str, dict[str, str]]:
    """The details panel's heading and its first table, row by row."""
    panel = browser.find_element("id", "details")
    rows = panel.find_elements("css selector", "#node-facts tr")
    facts = {
        r.find_element("tag name", "th").text: r.find_element("tag name", "td").text for r in rows
    }
    return panel.find_element("tag name", "h2").text, facts


def search(browser: Any, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    box = browser.find_element("id", "search")
    box.clear()
    box.send_keys(text, Keys.ENTER)


def drawn_first(view: dict) -> int:
    groups, opened = view["groups"], set(view["open"])
    return sum(len(groups[k]["c"]) for k in opened if k == 0 or groups[k]["p"] in opened)


@pytest.fixture(scope="module")
def rnn_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    forward = unrolled(12)
    joint = gc.gradients(forward, wrt=["w", "u"])
    folder = tmp_path_factory.mktemp("view")
    return gc.viz.view({"forward": forward, "forward + backward": joint}, folder / "rnn.html")


def test_open_expand_search_click_and_switch_views(browser: Any, rnn_page: Path) -> None:
    from selenium.webdriver.support.ui import Select

    open_page(browser, rnn_page)
    data = page_data(rnn_page)
    assert visible(browser) == drawn_first(data["views"][0])  # what the data says opens

    # close everything, then open the loop and one of its steps, click by click
    browser.find_element("id", "collapse-all").click()
    assert visible(browser) == len(data["views"][0]["groups"][0]["c"])
    loop = browser.find_element("css selector", 'g.item.group[data-name$="× 12"]')
    loop.click()
    assert visible(browser) == len(data["views"][0]["groups"][0]["c"]) + 12  # its steps
    before = visible(browser)
    browser.find_element("css selector", 'g.item.group[data-name="step 2"]').click()
    assert visible(browser) == before + 5  # slice, two matmuls, add, tanh
    assert browser.find_elements("css selector", 'g.item.box[data-name="step 2"]')
    assert "step 2" in browser.find_element("id", "breadcrumb").text

    # search by name: the node is revealed and described
    search(browser, "h_12")  # the last step's, in a group still closed
    name, facts = details(browser)
    assert name == "h_12"
    assert facts["type"] == "f32[2,4]"
    assert facts["source"].startswith(str(Path(__file__).with_name("test_view.py")) + ":")
    crumbs = browser.find_element("id", "breadcrumb").text
    assert crumbs.startswith("rnn_loop") and crumbs.endswith("h_12") and "step 12" in crumbs
    assert browser.find_elements("css selector", 'g.item.node.selected[data-name="h_12"]')

    # a click on a node in the drawing
    browser.find_element("css selector", 'g.item.node[data-name="mean"]').click()
    assert details(browser)[0] == "mean"

    # the joint view: a gradient says which input it differentiates, and links to it
    Select(browser.find_element("id", "view-select")).select_by_index(1)
    assert "forward + backward" in browser.find_element("id", "status").text
    search(browser, "grad_u")
    name, facts = details(browser)
    assert name == "grad_u" and facts["gradient of"] == "u"
    browser.find_element("css selector", "#node-facts button.link").click()
    assert details(browser)[0] == "u"

    # a search by op lists its matches
    search(browser, "tanh")
    results = browser.find_element("id", "search-results")
    assert "12 matches" in results.get_attribute("textContent")

    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []


def test_wheel_zooms_and_drag_pans(browser: Any, rnn_page: Path) -> None:
    import re

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    open_page(browser, rnn_page)
    viewport = browser.find_element("id", "viewport")

    def camera() -> list[float]:  # translate x, y and scale
        return [float(v) for v in re.findall(r"-?[\d.]+", viewport.get_attribute("transform"))]

    x, y, k = camera()
    canvas = browser.find_element("id", "canvas")
    origin = ScrollOrigin.from_element(canvas, -canvas.rect["width"] // 2 + 20, 0)
    ActionChains(browser).scroll_from_origin(origin, 0, -300).perform()
    assert camera()[2] > k  # scrolling up zooms in
    x, y, k = camera()
    corner = (-canvas.rect["width"] // 2 + 10, canvas.rect["height"] // 2 - 60)  # empty
    ActionChains(browser).move_to_element_with_offset(
        canvas, *corner
    ).click_and_hold().move_by_offset(120, -80).release().perform()
    assert camera() == pytest.approx([x + 120, y - 80, k])


def test_hostile_names_are_shown_as_text_and_run_nothing(browser: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    page = gc.viz.view(hostile_graph(), tmp_path / "hostile.html")
    open_page(browser, page)
    assert visible(browser) == len(HOSTILE)  # the page ran: every node drawn
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 (no injected script ran)
    drawn = [e.get_attribute("data-name") for e in browser.find_elements("css selector", "g.item")]
    assert sorted(drawn) == sorted(HOSTILE)
    assert browser.find_elements("css selector", "#canvas img, #details img") == []
    items = browser.find_elements("css selector", "g.item")
    next(e for e in items if e.get_attribute("data-name") == HOSTILE[0]).click()
    name, facts = details(browser)
    assert name == HOSTILE[0] and facts["source"] == "<img src=x onerror=alert(1)>:1"
    assert browser.title == "</script>{{title}} · graphc view"


def test_screenshot_shows_a_drawing(browser: Any, rnn_page: Path) -> None:
    image = pytest.importorskip("PIL.Image", reason="needs Pillow to read the screenshot")
    open_page(browser, rnn_page)
    png = browser.get_screenshot_as_png()
    pixels = image.open(io.BytesIO(png)).convert("RGB")
    colours = pixels.getcolors(maxcolors=1 << 20)
    assert colours is not None
    most = max(count for count, _ in colours)
    width, height = pixels.size
    assert len(colours) > 200  # text, boxes of several roles, edges
    assert most < 0.9 * width * height  # not one blank background
    # the canvas itself holds drawn boxes, not only the toolbar and the panel
    boxes = browser.find_elements("css selector", "#items g.item")
    assert len(boxes) == visible(browser) - len(browser.find_elements("css selector", "#boxes g"))


def screenshot(page: Path, png: Path, view: int = 0, find: str = "") -> str:
    """Open `page` in headless Chromium, show view `view`, search `find`, save `png`;
    returns what the page says it drew and when it was ready."""
    import tempfile

    from selenium.webdriver.support.ui import Select

    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        driver = chromium(Path(profile), 1600, 1000)
        try:
            open_page(driver, page)
            ready = driver.find_element("tag name", "body").get_attribute("data-ready")
            if view:
                Select(driver.find_element("id", "view-select")).select_by_index(view)
            if find:
                search(driver, find)
            driver.save_screenshot(str(png))
            status = driver.find_element("id", "status").text
        finally:
            driver.quit()
    return f"{png}: {status}; first drawing {ready} ms after navigation"


if __name__ == "__main__":  # python -m tests.viz.test_view_browser PAGE PNG [VIEW [SEARCH]]
    import sys

    page, png, *rest = sys.argv[1:]
    view = int(rest[0]) if rest else 0
    print(screenshot(Path(page).resolve(), Path(png), view, rest[1] if len(rest) > 1 else ""))
