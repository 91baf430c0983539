// What the reviewer looks for in the lines a patch adds: pure functions, no I/O.

const SECRET_NAME = /(api[_-]?key|secret|passw(or)?d|token|credential|private[_-]?key|access[_-]?key)/i;
const ASSIGNMENT = /([A-Za-z_][A-Za-z0-9_]*|["'][A-Za-z0-9_-]+["'])\s*(?::\s*[A-Za-z_][\w[\], ]*)?\s*[:=]\s*[rbu]?(["'])([^"']+)\2/g;
const RULES = [
  ["eval-exec", /\b(?:eval|exec)\s*\((?!\s*[rbuf]?['"][^'"]*['"]\s*\))/,
   "eval/exec of a value that is not a constant runs whatever the input says; parse it instead"],
  ["shell-true", /\bshell\s*=\s*True\b/,
   "shell=True hands the command line to a shell, so input in it can inject commands; pass a list of arguments"],
  ["tls-verify-off", /\bverify\s*=\s*False\b|\bcheck_hostname\s*=\s*False\b|\bCERT_NONE\b|_create_unverified_context|\brejectUnauthorized\s*:\s*false\b/,
   "this turns TLS certificate verification off; keep it on (pass a CA bundle for a private certificate)"],
];
const SECRET_MESSAGE =
  "this line hard-codes what looks like a credential; read it from the environment or a secret store";

/** [path, line in the new file, text] of every line a unified diff adds. */
export function addedLines(patch) {
  const out = [];
  let path = null;
  let line = 0;
  for (const raw of patch.split("\n")) {
    if (raw.startsWith("+++ ")) {
      path = raw.slice(4).replace(/^b\//, "");
      path = path === "/dev/null" ? null : path;
    } else if (raw.startsWith("@@")) {
      const m = /\+(\d+)/.exec(raw);
      line = m ? Number(m[1]) : 0;
    } else if (path && raw.startsWith("+")) {
      out.push([path, line, raw.slice(1)]);
      line += 1;
    } else if (path && (raw.startsWith(" ") || raw === "")) {
      line += 1;
    }
  }
  return out;
}

function secretAssignment(code) {
  for (const m of code.matchAll(ASSIGNMENT)) {
    if (SECRET_NAME.test(m[1].replace(/["']/g, "")) && m[3].trim()) return true;
  }
  return false;
}

/** The findings (`Finding` of `codeloop schema`) for the lines `patch` adds. */
export function scan(patch) {
  if (!patch) return [];
  const findings = [];
  for (const [path, line, text] of addedLines(patch)) {
    const code = text.split("#")[0];
    if (secretAssignment(code)) {
      findings.push({ path, line, rule: "hardcoded-secret", severity: "error", message: SECRET_MESSAGE });
    }
    for (const [rule, pattern, message] of RULES) {
      if (pattern.test(code)) findings.push({ path, line, rule, severity: "error", message });
    }
  }
  return findings;
}
