//! Yanking and unyanking versions, and a plugin's owners: invited by an
//! owner, they become owners when they accept, and can be removed, never the
//! last.

use rusqlite::{OptionalExtension, params};

use crate::error::{Error, Result};
use crate::{Account, OwnerList, Registry, Role, db, names};

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

    /// The accounts that own `id`, and those invited to.
    pub async fn owners(&self, id: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        let id = id.to_string();
        self.db(move |conn| {
            plugin_exists(conn, &id)?;
            owner_list(conn, &id)
        })
        .await
    }

    /// Invites `users` (account names) to own `id`: its owners and admins
    /// may. An invited account owns nothing until it accepts
    /// ([`Registry::accept_ownership`]), so nobody is made to answer for a
    /// plugin without agreeing to. Accounts that already own it are left
    /// as they are. Returns the owners and invitations after.
    pub async fn invite_owners(
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
                let invited = account_id(&tx, user)?;
                tx.execute(
                    "INSERT OR IGNORE INTO owner_invitations (plugin, account, invited_by, created_at)
                     SELECT ?1, ?2, ?3, ?4
                     WHERE NOT EXISTS (SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2)",
                    params![id, invited, account.id, db::now()],
                )?;
            }
            let owners = owner_list(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, ?users, account = %account.name, "owners invited");
            Ok(owners)
        })
        .await
    }

    /// `account` accepts its invitation to own `id` and becomes an owner;
    /// 404 if it has none. Returns the owners and invitations after.
    pub async fn accept_ownership(&self, account: &Account, id: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        let (id, account) = (id.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            plugin_exists(&tx, &id)?;
            let taken = tx.execute(
                "DELETE FROM owner_invitations WHERE plugin = ?1 AND account = ?2",
                params![id, account.id],
            )?;
            if taken == 0 {
                return Err(Error::NotFound(format!(
                    "account {} has no invitation to own plugin {id}",
                    account.name
                )));
            }
            tx.execute(
                "INSERT OR IGNORE INTO owners (plugin, account) VALUES (?1, ?2)",
                params![id, account.id],
            )?;
            let owners = owner_list(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, account = %account.name, "ownership accepted");
            Ok(owners)
        })
        .await
    }

    /// Removes `user` from the owners of `id`, or withdraws its invitation:
    /// its owners and admins may (an owner may remove itself). The last
    /// owner cannot be removed ([`Error::LastOwner`]): a plugin always has
    /// someone to answer for it. Returns the owners and invitations after.
    pub async fn remove_owner(&self, account: &Account, id: &str, user: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        names::account(user)?;
        let (id, user, account) = (id.to_string(), user.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            may_manage(&tx, &account, &id)?;
            let removed = account_id(&tx, &user)?;
            let withdrawn = tx.execute(
                "DELETE FROM owner_invitations WHERE plugin = ?1 AND account = ?2",
                params![id, removed],
            )?;
            let is_owner = tx
                .query_row(
                    "SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2",
                    params![id, removed],
                    |r| r.get::<_, i64>(0),
                )
                .optional()?
                .is_some();
            if is_owner {
                let owners: i64 = tx.query_row(
                    "SELECT count(*) FROM owners WHERE plugin = ?1",
                    [&id],
                    |r| r.get(0),
                )?;
                if owners <= 1 {
                    return Err(Error::LastOwner(format!(
                        "{user} is the last owner of plugin {id}: invite another owner, and \
                         let them accept, before removing it"
                    )));
                }
                tx.execute(
                    "DELETE FROM owners WHERE plugin = ?1 AND account = ?2",
                    params![id, removed],
                )?;
            } else if withdrawn == 0 {
                return Err(Error::NotFound(format!(
                    "account {user} neither owns plugin {id} nor is invited to"
                )));
            }
            let owners = owner_list(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, %user, account = %account.name, "owner removed");
            Ok(owners)
        })
        .await
    }
}

/// The id of the account `name`; 404 if there is none.
fn account_id(conn: &rusqlite::Connection, name: &str) -> Result<i64> {
    conn.query_row("SELECT id FROM accounts WHERE name = ?1", [name], |r| {
        r.get(0)
    })
    .optional()?
    .ok_or_else(|| Error::NotFound(format!("there is no account {name}")))
}

/// The owners and invitations of `id`.
fn owner_list(conn: &rusqlite::Connection, id: &str) -> Result<OwnerList> {
    let mut stmt = conn.prepare(
        "SELECT a.name FROM owner_invitations i JOIN accounts a ON a.id = i.account
         WHERE i.plugin = ?1 ORDER BY a.name",
    )?;
    let invited = stmt
        .query_map([id], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(OwnerList {
        users: owners_of(conn, id)?,
        invited,
    })
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
