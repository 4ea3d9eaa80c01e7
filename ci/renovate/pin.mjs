// What the bot's first run writes when it pins every image by digest and every action by commit,
// by Renovate's own code.
//
// Usage: node pin.mjs <extraction report> <out-dir>
// For every image and action of the report that has no digest yet, this makes the upgrade a
// "pin digest" pull request makes (same tag, a digest or commit) and applies it with Renovate's
// auto-replace, the way the bot edits a file: each manager's replace string and template. The
// digests are made up (sha256 of the reference), since no registry is reachable; the files go
// to <out-dir>/<path>. tests/test_renovate.py checks that the results still parse and name
// every image by tag and digest.
import { createHash } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { GlobalConfig } from "renovate/dist/config/global.js";
import { doAutoReplace } from "renovate/dist/workers/repository/update/branch/auto-replace.js";

const [reportPath, outDir] = process.argv.slice(2);
const report = JSON.parse(await readFile(reportPath, "utf8"));
// Renovate writes each step of a replacement to its working copy: here, the output directory.
GlobalConfig.set({ localDir: outDir });

for (const repository of Object.values(report.repositories)) {
  for (const [manager, packageFiles] of Object.entries(repository.packageFiles)) {
    for (const packageFile of packageFiles) {
      const { deps, ...fileConfig } = packageFile;
      const original = await readFile(packageFile.packageFile, "utf8");
      let content = original;
      let pinned = 0;
      for (const [depIndex, dep] of deps.entries()) {
        if (dep.currentDigest || !dep.currentValue) continue;
        const image = dep.datasource === "docker" && dep.depType !== "helm-chart" && !dep.skipReason;
        // An action resolves to its release's commit (skipped offline only for want of a token).
        const action = dep.depType === "action";
        if (!image && !action) continue;
        const reference = `${dep.depName}:${dep.currentValue}`;
        const hash = createHash("sha256").update(reference).digest("hex");
        const newDigest = image ? `sha256:${hash}` : hash.slice(0, 40);
        const upgrade = {
          ...fileConfig,
          ...dep,
          manager,
          depIndex,
          updateType: "pinDigest",
          newValue: dep.currentValue,
          newDigest,
        };
        const updated = await doAutoReplace(upgrade, content, false);
        if (updated === content) throw new Error(`${packageFile.packageFile}: ${reference} unchanged`);
        content = updated;
        pinned += 1;
      }
      const target = join(outDir, packageFile.packageFile);
      if (pinned === 0) continue;
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, content);
    }
  }
}
