// bridge-store history viewer: loads more of a transcript, follows a live run, keys.
// Plain JavaScript, no dependencies. Every page works without it.
"use strict";

(function () {
  const POLL_MS = 1000;
  const transcript = document.getElementById("transcript");

  function blocks() {
    return Array.from(document.querySelectorAll("#transcript > .block"));
  }

  // A block of the new page that continues one already shown (a text cut by the page
  // boundary, a tool call whose later events arrive now) updates it instead.
  function merge(incoming, first) {
    const key = incoming.dataset.key;
    const existing = key && key.startsWith("call-")
      ? transcript.querySelector('[data-key="' + CSS.escape(key) + '"]') : null;
    if (existing) {
      const details = existing.querySelector("details");
      incoming.querySelectorAll("[data-part]").forEach(function (part) {
        const old = existing.querySelector('[data-part="' + part.dataset.part + '"]');
        if (old) old.replaceWith(part);
        else details.insertBefore(part, details.querySelector(".call-id"));
      });
      return true;
    }
    const last = transcript.lastElementChild;
    if (first && incoming.dataset.join && last && last.dataset.join === incoming.dataset.join) {
      const oldText = last.querySelector('[data-part="text"]');
      const newText = incoming.querySelector('[data-part="text"]');
      if (oldText && newText) oldText.textContent += newText.textContent;
      const summary = incoming.querySelector('[data-part="summary"]');
      const oldSummary = last.querySelector('[data-part="summary"]');
      if (summary && oldSummary) oldSummary.replaceWith(summary);
      return true;
    }
    return false;
  }

  function append(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html;
    Array.from(holder.content.children).forEach(function (incoming, index) {
      if (!merge(incoming, index === 0)) transcript.appendChild(incoming);
    });
    const none = document.getElementById("no-events");
    if (none && transcript.children.length) none.remove();
  }

  function setup() {
    if (!transcript) return;
    const state = {
      url: transcript.dataset.url,
      next: transcript.dataset.next,
      more: transcript.dataset.more === "true",
      live: transcript.dataset.live === "true",
      busy: false,
      // The reader reached the end while a page was loading: load the next one after.
      wanted: false,
    };
    const more = document.getElementById("more");
    const live = document.getElementById("live");
    const status = document.getElementById("run-status");
    // Older events load on their own as the reader reaches the end of the page.
    const watcher = more && "IntersectionObserver" in window ?
      new IntersectionObserver(function (entries) {
        if (entries.some(function (entry) { return entry.isIntersecting; }) && state.more) load();
      }, { rootMargin: "400px" }) : null;

    function load() {
      if (state.busy) {
        state.wanted = true;
        return;
      }
      state.busy = true;
      transcript.setAttribute("aria-busy", "true");
      const address = state.url + "&format=fragment" +
        (state.next ? "&after=" + encodeURIComponent(state.next) : "");
      fetch(address, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (page) {
          append(page.html);
          state.next = page.next || state.next;
          state.more = page.more;
          state.live = page.live;
          if (status && page.run && page.run.status !== status.textContent) {
            status.textContent = page.run.status;
            status.className = "badge status-" + page.run.status;
          }
          // The header follows the run too: its duration, and its usage once reported.
          if (page.header) {
            const took = document.getElementById("run-duration");
            if (took) took.textContent = page.header.duration;
            const usage = document.getElementById("usage-body");
            if (usage && page.header.usageHtml) usage.innerHTML = page.header.usageHtml;
          }
          if (more && !state.more) more.parentElement.remove();
          if (live && !state.live) live.textContent = state.more ? "" : "This run has ended.";
        })
        .catch(function (error) {
          if (live) live.textContent = "Could not load new events (" + error.message + ").";
          state.live = false;
        })
        .finally(function () {
          state.busy = false;
          transcript.setAttribute("aria-busy", "false");
          if (state.wanted && state.more) {
            state.wanted = false;
            load();
          } else if (state.more && watcher) {
            // An observer reports only changes: if the reader scrolled to the end in the
            // same frame the page was added, "more" never left the view and no change
            // would come. Observing again reports where it is now.
            watcher.unobserve(more);
            watcher.observe(more);
          } else if (!state.more && state.live) {
            window.setTimeout(load, POLL_MS);
          }
        });
    }

    if (more) {
      more.addEventListener("click", function (event) {
        event.preventDefault();
        load();
      });
      if (watcher) watcher.observe(more);
    }
    if (!state.more && state.live) window.setTimeout(load, POLL_MS);

    // "Show all": the whole argument or result, from the same page's JSON.
    transcript.addEventListener("click", function (event) {
      const link = event.target.closest("a.show-all");
      if (!link) return;
      event.preventDefault();
      const address = state.url + "&format=json&after=" + encodeURIComponent(link.dataset.after) +
        "&limit=" + encodeURIComponent(link.dataset.limit);
      fetch(address, { credentials: "same-origin" })
        .then(function (response) { return response.json(); })
        .then(function (page) {
          const call = page.blocks.find(function (block) { return block.callId === link.dataset.call; });
          if (!call) return;
          const value = call[link.dataset.field];
          const pre = link.parentElement.querySelector("pre");
          pre.textContent = typeof value === "string" ? value : JSON.stringify(value, null, 2);
          pre.dataset.full = "true";
          link.remove();
          pre.focus();
        });
    });
  }

  // j / k move between transcript blocks; Enter on a block opens or closes its card.
  function keys(event) {
    if (!transcript || event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target.closest && target.closest("input, select, textarea")) return;
    const all = blocks();
    if (!all.length) return;
    const current = target.closest ? target.closest("#transcript > .block") : null;
    const index = current ? all.indexOf(current) : -1;
    if (event.key === "j" || event.key === "k") {
      const next = event.key === "j" ? Math.min(index + 1, all.length - 1) : Math.max(index - 1, 0);
      all[next].focus();
      event.preventDefault();
    } else if (event.key === "Enter" && current === target) {
      const details = current.querySelector("details");
      if (details) {
        details.open = !details.open;
        event.preventDefault();
      }
    }
  }

  document.addEventListener("keydown", keys);
  setup();
})();
