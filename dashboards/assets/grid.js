/* gpuledger dashboards: the grids' helpers (dashboards/ui.py table). Served by Dash from assets/. */

/* "Export CSV" under a grid: the grid's own export, so the file holds what the grid holds (its rows as filtered and
   sorted, every page of them) with the headers it shows. */
document.addEventListener("click", function (event) {
  var button = event.target.closest && event.target.closest("button.csv-export[data-grid]");
  if (!button) return;
  var id = button.getAttribute("data-grid");
  dash_ag_grid.getApiAsync(id).then(function (api) {
    api.exportDataAsCsv({ fileName: id + ".csv" });
  });
});

/* A share of a limit as a bar inside its cell: the bar fills at 100 %, and turns red past it. */
var dagfuncs = (window.dashAgGridFunctions = window.dashAgGridFunctions || {});
dagfuncs.gpuledgerBar = function (params) {
  var v = params.value;
  if (v == null || isNaN(v)) return null;
  var width = Math.max(0, Math.min(100, v));
  var colour = v > 100 ? "#f4a6a6" : v >= 90 ? "#f8d49a" : "#b9d7f0";
  return {
    background: "linear-gradient(90deg, " + colour + " " + width + "%, transparent " + width + "%)",
    fontWeight: v > 100 ? "600" : "normal",
  };
};

/* A cell that names a node, GPU or job, as a link to its page (dashboards/ui.py table(links=...)): the href is in the
   row under "__href_<column>", the text is the cell's value as text (never markup). A plain click moves within the
   app as dcc.Link does (no reload); a click with a modifier opens a tab as any link does. */
var dagcomps = (window.dashAgGridComponentFunctions = window.dashAgGridComponentFunctions || {});
dagcomps.gpuledgerLink = function (props) {
  var href = props.data && props.data["__href_" + props.colDef.field];
  var text = props.valueFormatted != null ? props.valueFormatted : props.value;
  if (!href) return React.createElement("span", null, text == null ? "" : String(text));
  return React.createElement(
    "a",
    {
      href: href,
      onClick: function (event) {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        window.history.pushState({}, "", href);
        window.dispatchEvent(new CustomEvent("_dashprivate_pushstate"));
        window.scrollTo(0, 0);
      },
    },
    text == null ? "" : String(text)
  );
};
