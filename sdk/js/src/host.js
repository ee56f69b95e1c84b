// The host behind the SDK: the component's imports in a build
// (component.js), an in-memory fake in tests (testing.js). Everything the
// SDK asks of the host goes through the backend set here.

/** A host service's refusal: `kind` is the WIT `service-error` case. */
export class ServiceError extends Error {
  /**
   * @param {'denied' | 'invalid' | 'limit-exceeded' | 'unavailable'} kind
   * @param {string} message
   */
  constructor(kind, message) {
    super(message);
    this.name = 'ServiceError';
    this.kind = kind;
  }
}

let backend = null;

/** Sets the backend every SDK call goes to. */
export function setHost(host) {
  backend = host;
}

/** The backend; outside a component or a test's fake host, an error that says so. */
export function host() {
  if (!backend) {
    throw new Error(
      'no sandwit host: the SDK reaches the host inside a component built by `sandwit plugin build`, ' +
        "or in tests through `new FakeHost()` from 'sandwit-plugin/testing'",
    );
  }
  return backend;
}
