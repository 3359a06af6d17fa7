#!/usr/bin/env bash
# Vendors the charting libraries into static/vendor/ from the npm registry (pinned in package.json
# and package-lock.json). The built files are committed, so the site and the demo run offline;
# re-run this after changing a version and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund --ignore-scripts
# esbuild's native binary comes from its own optional package; install scripts are off above.
node node_modules/esbuild/install.js
out=static/vendor
mkdir -p "$out"
cp node_modules/vega/build/vega.min.js "$out/vega.min.js"
cp node_modules/vega-lite/build/vega-lite.min.js "$out/vega-lite.min.js"
cp node_modules/vega-embed/build/vega-embed.min.js "$out/vega-embed.min.js"
# vega-interpreter ships only an ES module: bundle it as a script exposing `vegaInterpreter`
# (evaluates expressions without eval / new Function, so charts run under script-src 'self').
node_modules/.bin/esbuild node_modules/vega-interpreter/build/vega-interpreter.js --bundle \
  --minify --format=iife --global-name=vegaInterpreter --outfile="$out/vega-interpreter.min.js" \
  --log-level=warning
{
  echo "# Vendored by scripts/vendor_js.sh from the npm registry; do not edit by hand."
  for pkg in vega vega-lite vega-embed vega-interpreter; do
    node -e "const p=require('./node_modules/$pkg/package.json');console.log(p.name+' '+p.version+' '+p.license)"
  done
} > "$out/VERSIONS.txt"
for pkg in vega vega-lite vega-embed vega-interpreter; do
  cp "node_modules/$pkg/LICENSE" "$out/LICENSE.$pkg.txt"
done
(cd "$out" && sha256sum ./*.min.js > SHA256SUMS)
echo "vendored into $out:"; cat "$out/VERSIONS.txt"
