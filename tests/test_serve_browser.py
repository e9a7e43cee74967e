"""`mt serve`'s page in a real browser: headless Chromium, driven by selenium, types German and
reads the English the page fetched from POST /translate, and its three alternatives under it,
then chooses HTML and reads the translated page as text, markup kept; with
a many-to-English model it chooses French from the page's list of directions, translates it, and
finds French still chosen after a reload.
Needs chromium and chromium-driver (Debian packages); without them the test is skipped and says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import ServeProcess, start_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SENTENCE = "Ein kleines Mädchen klettert in ein Spielhaus aus Holz."

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver)",
)


@pytest.fixture
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def page_state(driver: object) -> str:
    """The page's ``data-state``: translating, done or error."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").get_attribute("data-state")


@pytest.fixture
def page_server(trained_run: Path) -> Iterator[ServeProcess]:
    running = start_server(trained_run)
    yield running
    assert running.stop() == 0


def test_the_page_translates_what_a_person_types(page_server, browser, trained_run) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from mt_cli.config.options import TranslateOptions
    from mt_cli.decode.translator import Translator
    from mt_cli.trained import load_trained

    # The page asks for 3 alternatives: n-best 4 in a beam of max(the tiny recipe's 3, 4).
    translator = Translator.of(load_trained(trained_run), device="cpu")
    hyps = [
        hyp.text for hyp in translator.translate([SENTENCE], TranslateOptions(beam=4, n_best=4))[0].hypotheses
    ]
    assert len(set(hyps)) == 4, hyps  # else fewer alternatives would show, and prove less
    browser.get(f"{page_server.url}/")
    wait = WebDriverWait(browser, 30)
    wait.until(lambda driver: driver.find_element(By.ID, "source-label").text == "German")
    assert browser.find_element(By.ID, "target-label").text == "English"
    assert not browser.find_element(By.ID, "direction-box").is_displayed()  # one direction: no lists
    browser.find_element(By.ID, "source-text").send_keys(SENTENCE)
    browser.find_element(By.ID, "translate").click()
    wait.until(lambda driver: page_state(driver) == "done")
    assert browser.find_element(By.ID, "translation").text == hyps[0]
    shown = browser.find_elements(By.CSS_SELECTOR, "#alternatives li")
    assert [item.text for item in shown] == hyps[1:]
    assert browser.find_element(By.ID, "alternatives-box").is_displayed()
    assert browser.find_element(By.ID, "error").text == ""

    # Ctrl+Enter translates too, and a server error is shown, not swallowed.
    box = browser.find_element(By.ID, "source-text")
    browser.execute_script("arguments[0].value = 'x'.repeat(5000)", box)  # typing 5000 keys takes long
    box.send_keys("x", Keys.CONTROL, Keys.ENTER)
    wait.until(lambda driver: page_state(driver) == "error")
    assert "5000" in browser.find_element(By.ID, "error").text
    assert not browser.find_element(By.ID, "alternatives-box").is_displayed()  # none for a failure

    # HTML from the format list: the page's text translated, its markup kept, the answer shown as
    # its source (never rendered: the script in it does not run).
    page = '<p class="x">Ein <b>kleines</b> Mädchen klettert. Es lacht.</p><script>alert("x")</script>'
    request = {"q": page, "source": "de", "target": "en", "format": "html", "alternatives": 3}
    expected = httpx.post(f"{page_server.url}/translate", json=request, timeout=60).json()["translatedText"]
    assert expected.startswith('<p class="x">') and expected.endswith('</p><script>alert("x")</script>')
    Select(browser.find_element(By.ID, "format")).select_by_value("html")
    browser.execute_script("arguments[0].value = arguments[1]", box, page)
    browser.find_element(By.ID, "translate").click()
    wait.until(lambda driver: page_state(driver) == "done")
    assert browser.find_element(By.ID, "translation").text == expected
    assert browser.find_elements(By.CSS_SELECTOR, "#translation *") == []  # text, no elements


def test_the_page_of_a_many_to_english_model_chooses_the_source(
    many_to_english, many_to_english_sentences, browser
) -> None:
    run, sentences = many_to_english, many_to_english_sentences
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    server = start_server(run)
    try:
        # What the API answers for fr -> en with the page's 3 alternatives (test_directions checks
        # the API against mt's own decoding).
        request = {"q": sentences["fr"], "source": "fr", "target": "en", "alternatives": 3}
        expected = httpx.post(f"{server.url}/translate", json=request).json()
        browser.get(f"{server.url}/")
        wait = WebDriverWait(browser, 30)
        wait.until(lambda driver: driver.find_element(By.ID, "direction-box").is_displayed())
        source, target = (
            Select(browser.find_element(By.ID, "source-lang")),
            Select(browser.find_element(By.ID, "target-lang")),
        )
        assert [option.text for option in source.options] == ["German", "French", "Czech"]
        assert [option.text for option in target.options] == ["English"]
        assert browser.find_element(By.ID, "source-label").text == "German"
        source.select_by_value("fr")
        assert browser.find_element(By.ID, "source-label").text == "French"
        assert browser.find_element(By.ID, "status").text.startswith("French → English")
        browser.find_element(By.ID, "source-text").send_keys(sentences["fr"])
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda driver: page_state(driver) == "done")
        assert browser.find_element(By.ID, "translation").text == expected["translatedText"]
        shown = browser.find_elements(By.CSS_SELECTOR, "#alternatives li")
        assert [item.text for item in shown] == expected["alternatives"]
        assert browser.find_element(By.ID, "error").text == ""

        # A reload keeps the pair chosen last; a stored pair the model does not know is ignored.
        def reload(stored: str | None = None) -> str:
            """The source label after a reload (with ``stored`` as the kept pair, if given)."""
            if stored is not None:
                browser.execute_script("localStorage.setItem('mt.pair', arguments[0])", stored)
            browser.refresh()
            wait.until(lambda driver: driver.find_element(By.ID, "direction-box").is_displayed())
            return browser.find_element(By.ID, "source-label").text

        assert reload() == "French"
        assert Select(browser.find_element(By.ID, "source-lang")).first_selected_option.text == "French"
        assert reload('{"source": "xx", "target": "en"}') == "German"
        assert reload("{not json") == "German"
    finally:
        assert server.stop() == 0
