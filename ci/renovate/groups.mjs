// Which packageRules group Renovate puts each extracted dependency in, by Renovate's own code.
//
// Usage: node groups.mjs <renovate.json> <extraction report> > groups.json
// The extraction report is what `renovate --platform=local --dry-run=extract --report-type=file`
// writes. This resolves the configuration's presets (all built in: nothing is fetched) and
// applies its package rules to every dependency the way a run does before its look-ups, then
// prints one record per dependency: where it is, what it is, its groupName and whether it is
// enabled, and for one whose digest Renovate would pin, the group of that pin (pinGroupName).
// tests/test_renovate.py reads it to hold each compatibility pair to one group.
import { readFile } from "node:fs/promises";
import { getConfig } from "renovate/dist/config/defaults.js";
import { getManagerConfig, mergeChildConfig } from "renovate/dist/config/index.js";
import { resolveConfigPresets } from "renovate/dist/config/presets/index.js";
import { applyPackageRules } from "renovate/dist/util/package-rules/index.js";

const [configPath, reportPath] = process.argv.slice(2);
const repositoryConfig = JSON.parse(await readFile(configPath, "utf8"));
const report = JSON.parse(await readFile(reportPath, "utf8"));
const { config: resolved } = await resolveConfigPresets(repositoryConfig);
const config = mergeChildConfig(getConfig(), resolved);

const records = [];
for (const repository of Object.values(report.repositories)) {
  for (const [manager, packageFiles] of Object.entries(repository.packageFiles)) {
    const managerConfig = getManagerConfig(config, manager);
    for (const packageFile of packageFiles) {
      const fileConfig = mergeChildConfig(managerConfig, { packageFile: packageFile.packageFile });
      for (const dep of packageFile.deps) {
        const depConfig = mergeChildConfig(fileConfig, dep);
        const applied = await applyPackageRules(depConfig, "pre-lookup");
        // The group a "pin digest" update of it would land in: the rules, then the built-in
        // pinDigest settings, then the rules again, as flatten.js makes an update's config.
        // Only an enabled dependency with pinDigests gets such an update (null otherwise): the
        // rules are most of this script's time, and most dependencies are charts or packages.
        let pinning = {};
        if (applied.enabled !== false && applied.pinDigests === true) {
          pinning = await applyPackageRules({ ...depConfig, updateType: "pinDigest" });
          pinning = await applyPackageRules(mergeChildConfig(pinning, pinning.pinDigest));
        }
        records.push({
          manager,
          packageFile: packageFile.packageFile,
          depName: dep.depName ?? null,
          packageName: dep.packageName ?? null,
          depType: dep.depType ?? null,
          datasource: dep.datasource ?? null,
          currentValue: dep.currentValue ?? null,
          currentDigest: dep.currentDigest ?? null,
          skipReason: dep.skipReason ?? null,
          replaceString: dep.replaceString ?? null,
          groupName: applied.groupName ?? null,
          enabled: applied.enabled !== false,
          pinDigests: applied.pinDigests === true,
          separateMajorMinor: applied.separateMajorMinor !== false,
          pinGroupName: pinning.groupName ?? null,
        });
      }
    }
  }
}
process.stdout.write(JSON.stringify(records, null, 1) + "\n");
