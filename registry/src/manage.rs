//! Yanking and unyanking versions, and a plugin's owners.

use rusqlite::{OptionalExtension, params};

use crate::error::{Error, Result};
use crate::{Account, OwnerList, Registry, Role, names};

/// The most accounts one owners request may name.
const MAX_OWNERS_PER_REQUEST: usize = 100;

impl Registry {
    /// Marks `id` `version` yanked (`true`) or not: it stays downloadable,
    /// but search and default installs skip it. Owners and admins only.
    pub async fn set_yanked(
        &self,
        account: &Account,
        id: &str,
        version: &str,
        yanked: bool,
    ) -> Result<()> {
        names::plugin_id(id)?;
        names::version(version)?;
        let (id, version, account) = (id.to_string(), version.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            may_manage(&tx, &account, &id)?;
            let changed = tx.execute(
                "UPDATE versions SET yanked = ?3 WHERE plugin = ?1 AND version = ?2",
                params![id, version, yanked],
            )?;
            if changed == 0 {
                return Err(Error::NotFound(format!("{id} has no version {version}")));
            }
            update_latest(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, %version, yanked, account = %account.name, "yank changed");
            Ok(())
        })
        .await
    }

    /// The accounts that own `id`.
    pub async fn owners(&self, id: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        let id = id.to_string();
        self.db(move |conn| {
            plugin_exists(conn, &id)?;
            Ok(OwnerList {
                users: owners_of(conn, &id)?,
            })
        })
        .await
    }

    /// Adds `users` (account names) to the owners of `id`: its owners and
    /// admins may. Returns the owners after.
    pub async fn add_owners(
        &self,
        account: &Account,
        id: &str,
        users: Vec<String>,
    ) -> Result<OwnerList> {
        names::plugin_id(id)?;
        if users.len() > MAX_OWNERS_PER_REQUEST {
            return Err(Error::bad_request(
                "too-many-users",
                format!("at most {MAX_OWNERS_PER_REQUEST} users per request"),
            ));
        }
        for user in &users {
            names::account(user)?;
        }
        let (id, account) = (id.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            may_manage(&tx, &account, &id)?;
            for user in &users {
                let added: Option<i64> = tx
                    .query_row("SELECT id FROM accounts WHERE name = ?1", [user], |r| {
                        r.get(0)
                    })
                    .optional()?;
                let Some(added) = added else {
                    return Err(Error::NotFound(format!("there is no account {user}")));
                };
                tx.execute(
                    "INSERT OR IGNORE INTO owners (plugin, account) VALUES (?1, ?2)",
                    params![id, added],
                )?;
            }
            let owners = owners_of(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, ?users, account = %account.name, "owners added");
            Ok(OwnerList { users: owners })
        })
        .await
    }
}

/// 404 unless the plugin `id` exists.
pub(crate) fn plugin_exists(conn: &rusqlite::Connection, id: &str) -> Result<()> {
    let found: Option<i64> = conn
        .query_row("SELECT 1 FROM plugins WHERE id = ?1", [id], |r| r.get(0))
        .optional()?;
    found
        .map(|_| ())
        .ok_or_else(|| Error::NotFound(format!("there is no plugin {id}")))
}

/// The owners' account names, sorted.
pub(crate) fn owners_of(conn: &rusqlite::Connection, id: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT a.name FROM owners o JOIN accounts a ON a.id = o.account
         WHERE o.plugin = ?1 ORDER BY a.name",
    )?;
    let owners = stmt
        .query_map([id], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(owners)
}

/// 404 unless `id` exists, 403 unless `account` owns it or is an admin.
fn may_manage(conn: &rusqlite::Connection, account: &Account, id: &str) -> Result<()> {
    plugin_exists(conn, id)?;
    if account.role == Role::Admin {
        return Ok(());
    }
    let owner: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2",
            params![id, account.id],
            |r| r.get(0),
        )
        .optional()?;
    owner.map(|_| ()).ok_or_else(|| {
        Error::NotAnOwner(format!(
            "account {} is not an owner of plugin {id}",
            account.name
        ))
    })
}

/// Sets `plugins.latest` of `id` to its highest version not yanked.
pub(crate) fn update_latest(conn: &rusqlite::Connection, id: &str) -> Result<()> {
    let mut stmt = conn.prepare("SELECT version FROM versions WHERE plugin = ?1 AND yanked = 0")?;
    let latest = stmt
        .query_map([id], |r| r.get::<_, String>(0))?
        .filter_map(|v| v.ok())
        .filter_map(|v| semver::Version::parse(&v).ok())
        .max();
    conn.execute(
        "UPDATE plugins SET latest = ?2 WHERE id = ?1",
        params![id, latest.map(|v| v.to_string())],
    )?;
    Ok(())
}
