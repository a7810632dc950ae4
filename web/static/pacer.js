// pacer support page: small progressive enhancements. Every page works
// without this script; it only adds the viewer's local time next to each
// UTC time, and shows just the credential fields of the chosen type.
(function () {
  "use strict";
  var fmt;
  try {
    fmt = new Intl.DateTimeFormat(undefined, {
      month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
      second: "2-digit", timeZoneName: "short"
    });
  } catch (e) {
    return;
  }
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

  function local(d) { return fmt.format(d); }

  // Each <time datetime> gets the local time beside its UTC text, unless
  // the viewer's clock is on UTC anyway.
  document.querySelectorAll("time[datetime]").forEach(function (el) {
    var d = new Date(el.getAttribute("datetime"));
    if (isNaN(d.getTime()) || d.getTimezoneOffset() === 0) { return; }
    var span = document.createElement("span");
    span.className = "local";
    span.textContent = local(d);
    el.title = local(d);
    var next = el.nextElementSibling;
    (next && next.classList.contains("rel") ? next : el).after(span);
  });

  if (new Date().getTimezoneOffset() !== 0) {
    document.querySelectorAll(".js-tz").forEach(function (el) {
      el.textContent = ", with your local time (" + zone + ") below each";
    });
  }

  // The release time is typed in UTC; say what that is locally.
  document.querySelectorAll("input[data-utc]").forEach(function (input) {
    var out = input.parentNode.querySelector(".js-local");
    function update() {
      if (!out) { return; }
      var d = input.value ? new Date(input.value + "Z") : null;
      out.textContent = d && !isNaN(d.getTime()) ? "= " + local(d) + " your time" : "";
    }
    input.addEventListener("input", update);
    input.addEventListener("focus", function () {
      var when = input.form && input.form.querySelector("input[name=when][value=at]");
      if (when) { when.checked = true; }
    });
    update();
  });

  // Show only the credential fields of the chosen type.
  document.querySelectorAll("select[data-cred-type]").forEach(function (sel) {
    var form = sel.form;
    function update() {
      form.querySelectorAll("fieldset[data-cred]").forEach(function (fs) {
        fs.hidden = fs.getAttribute("data-cred") !== sel.value;
      });
    }
    sel.addEventListener("change", update);
    update();
  });
})();

// The list, operation and scope pages keep themselves current (design §14):
// they reload every data-refresh seconds, but never while a form is being
// filled in (a field with focus, or text typed into one), nor while the tab
// is hidden; they try again a little later. Without this script a
// <noscript> meta refresh does the reload.
(function () {
  "use strict";
  var every = Number(document.body.getAttribute("data-refresh"));
  if (!(every > 0)) { return; }
  function busy() {
    var a = document.activeElement;
    if (a && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName) && a.type !== "submit") { return true; }
    return Array.prototype.some.call(document.querySelectorAll("textarea, input[type=text], input[type=password], input[type=search], input[type=datetime-local]"), function (el) {
      return el.value !== el.defaultValue;
    }) || Array.prototype.some.call(document.querySelectorAll("input[type=radio], input[type=checkbox]"), function (el) {
      return el.checked !== el.defaultChecked;
    });
  }
  function tick() {
    if (document.visibilityState === "visible" && !busy()) {
      window.location.reload();
      return;
    }
    setTimeout(tick, 5000);
  }
  setTimeout(tick, every * 1000);
})();
