/**
 * PNG charts for the benchmark report: chart.js drawn in the tests' headless Chromium (playwright-core), all
 * offline (chart.js and the browser come from node_modules). One browser for any number of charts.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { launchBrowser } from "../test/support/browser";

export interface ChartSpec {
  /** Where the PNG goes. */
  file: string;
  /** A chart.js configuration (JSON-serialisable: no callbacks). */
  config: Record<string, unknown>;
  width?: number;
  height?: number;
}

/** chart.js's browser build, beside the file its package exports. */
const chartJs = () =>
  readFileSync(join(dirname(createRequire(import.meta.url).resolve("chart.js")), "chart.umd.min.js"), "utf8");

/** Renders each chart to its PNG file. */
export async function renderCharts(charts: ChartSpec[]): Promise<void> {
  if (charts.length === 0) return;
  const script = chartJs();
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ deviceScaleFactor: 2 });
    for (const chart of charts) {
      const width = chart.width ?? 900;
      const height = chart.height ?? 420;
      await page.setViewportSize({ width, height });
      const config = {
        ...chart.config,
        options: { ...(chart.config.options as object), animation: false, responsive: false },
      };
      await page.setContent(
        `<!doctype html><html><body style="margin:0;background:#fff">
<canvas id="c" width="${width}" height="${height}"></canvas>
<script>${script}</script>
<script>new Chart(document.getElementById("c"), ${JSON.stringify(config)}); document.body.dataset.ready = "1";</script>
</body></html>`,
      );
      await page.waitForSelector("body[data-ready='1']");
      writeFileSync(chart.file, await page.locator("#c").screenshot({ type: "png" }));
    }
  } finally {
    await browser.close();
  }
}

/** A line chart over time with one or two y axes. */
export function lineChart(options: {
  title: string;
  xLabel: string;
  x: number[];
  series: { label: string; data: (number | null)[]; axis?: "left" | "right"; color: string }[];
  leftLabel: string;
  rightLabel?: string;
}): Record<string, unknown> {
  return {
    type: "line",
    data: {
      labels: options.x,
      datasets: options.series.map((s) => ({
        label: s.label,
        data: s.data,
        borderColor: s.color,
        backgroundColor: s.color,
        pointRadius: 2,
        yAxisID: s.axis === "right" ? "right" : "left",
      })),
    },
    options: {
      plugins: { title: { display: true, text: options.title } },
      scales: {
        x: { title: { display: true, text: options.xLabel } },
        left: { position: "left", beginAtZero: true, title: { display: true, text: options.leftLabel } },
        ...(options.rightLabel
          ? {
              right: {
                position: "right",
                beginAtZero: true,
                grid: { drawOnChartArea: false },
                title: { display: true, text: options.rightLabel },
              },
            }
          : {}),
      },
    },
  };
}

/** A grouped bar chart: one group per label, one bar per series. */
export function barChart(options: {
  title: string;
  labels: string[];
  series: { label: string; data: (number | null)[]; color: string }[];
  yLabel: string;
  logarithmic?: boolean;
}): Record<string, unknown> {
  return {
    type: "bar",
    data: {
      labels: options.labels,
      datasets: options.series.map((s) => ({ label: s.label, data: s.data, backgroundColor: s.color })),
    },
    options: {
      plugins: { title: { display: true, text: options.title } },
      scales: {
        y: {
          type: options.logarithmic ? "logarithmic" : "linear",
          ...(options.logarithmic ? {} : { beginAtZero: true }),
          title: { display: true, text: options.yLabel },
        },
      },
    },
  };
}

export const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"];
