// Which hosts an `http:` capability allows, as the host decides
// (`http:<host>[:<port>]`, `*.domain` for its subdomains, `:*` for any
// port, no port for 80 and 443): for the fake host's fetch, and for naming
// what a refused request lacked.

function portMatches(port, wanted) {
  if (port === '*') return true;
  if (port === '') return wanted === 80 || wanted === 443;
  return /^\d+$/.test(port) && Number(port) === wanted;
}

/** Whether an `http:<host>[:<port>]` capability among `caps` allows `host` on `port`. */
export function httpGranted(caps, host, port) {
  for (const cap of caps) {
    if (!cap.startsWith('http:')) continue;
    const target = cap.slice(5).toLowerCase();
    let name;
    let wantedPort;
    if (target.startsWith('[')) {
      const end = target.indexOf(']');
      name = target.slice(0, end + 1);
      wantedPort = target.slice(end + 1).replace(/^:/, '');
    } else {
      [name, wantedPort = ''] = target.split(':');
    }
    const ok = name.startsWith('*.') ? host.endsWith(name.slice(1)) && host.length > name.length - 1 : host === name;
    if (ok && portMatches(wantedPort, port)) return true;
  }
  return false;
}

/** The host and port a URL reaches. */
export function origin(url) {
  const parsed = new URL(url);
  const port = parsed.port ? Number(parsed.port) : parsed.protocol === 'https:' ? 443 : 80;
  return { host: parsed.hostname.toLowerCase(), port, authority: parsed.host };
}

/** Why the host may have refused a request to `url`, from the capabilities
 * the plugin asks for (what the operator granted it cannot know). */
export function refusal(asked, url) {
  const { host, port, authority } = origin(url);
  const http = asked.filter((c) => c.startsWith('http:'));
  if (!httpGranted(http, host, port)) {
    return `the plugin does not ask for \`http:${authority}\` (its http capabilities: ${http.join(', ') || 'none'}), and the host sends requests only to hosts asked for and granted`;
  }
  return `the plugin asks for it; the operator may not have granted \`http:${authority}\` (the run's events name a refused request), or the server could not be reached`;
}
